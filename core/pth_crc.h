// The zip CRC-32 (polynomial 0xEDB88320, reflected), as fast as the CPU allows (part of
// core/pth: every record load_pth reads is checked).
//
// Contract:
//  - crc32(crc, data, size) continues `crc` over `size` bytes: crc32(crc32(0, a), b) is the CRC
//    of a followed by b. On x86-64 CPUs with carry-less multiply (PCLMULQDQ) it folds 64 bytes
//    per step (~10x the table method); elsewhere, and for short inputs, it uses tables
//    (slicing by 16). crc32_portable() always uses the tables (tests compare the two).
//  - crc32_combine(crc_a, crc_b, size_b) is the CRC of a followed by b from the CRCs of the
//    pieces, so pieces can be checked on different threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xdino::pth {

uint32_t crc32(uint32_t crc, const void* data, size_t size);
uint32_t crc32_portable(uint32_t crc, const void* data, size_t size);
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

}  // namespace xdino::pth
