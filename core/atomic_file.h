// Atomic file replacement: readers see the old file or the new one, never a torn write.
//
// Contract:
//  - write_atomically(path, writer) calls writer(tmp) with a temporary path in the same folder
//    as `path`; if the writer returns normally, the temporary file is flushed to disk and
//    renamed over `path` (POSIX rename is atomic within a file system). If the writer throws,
//    the temporary file is removed, `path` is left exactly as it was, and the exception
//    propagates.
//  - The parent folder of `path` must exist; failures throw xdino::Error naming the path.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace xdino {

void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path& tmp)>& writer);

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// `to` becomes a copy of `from`, atomically. Copies with read(2)/write(2) rather than
// std::filesystem::copy_file, whose in-kernel copy reports a full tmpfs as EIO: a full disk
// must read "No space left on device" (throw_write_error). A missing `from` throws xdino::Error.
void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to);

// What every atomic writer says when a write fails with errno `err` (ENOSPC, EFBIG, EDQUOT,
// EIO; 0 reads "write failed"): throws xdino::Error "cannot write '<path>': <reason> (the
// previous file is left as it was)", naming the file the user asked for, not the temporary.
[[noreturn]] void throw_write_error(const std::filesystem::path& path, int err);

// Removes the temporary files that writers killed mid-write left in `dir` (those of processes
// that no longer exist; a live writer's are kept). Never throws.
void remove_stale_temporaries(const std::filesystem::path& dir);

// Reads a whole file; throws xdino::Error naming the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace xdino
