// Attention videos (video_generation.py): a video file is cut into frames, each frame gets its
// attention picture (eval/visualize.h write_frame: the mean over heads of the CLS attention,
// inferno colours), and the pictures are put back together into a video at the source frame
// rate.
//
// Contract:
//  - extract_frames(video, dir): every frame OpenCV's VideoCapture decodes, written as
//    dir/frame-NNNN.jpg (4 digits, from 0, as the script); returns the video's frame rate
//    (CAP_PROP_FPS; 0 when the container does not say). A file that cannot be opened or has no
//    frame: xdino::UsageError naming it.
//  - write_video(dir, file, fps, format): the dir/attn-*.jpg (and .png: frames given as PNG
//    keep their format) pictures, sorted by name, as one
//    video (format "mp4": fourcc mp4v, the tag FFmpeg accepts for the script's MP4V; "avi": XVID)
//    of the first picture's size at `fps`; pictures of another size are resized to it. No picture,
//    an unknown format, fps <= 0 or a writer OpenCV cannot open: xdino::Error. Returns the number
//    of frames written.
//  - is_video_file(path): a regular file whose extension is a video container's (.mp4, .avi,
//    .mov, .mkv, .webm, .m4v, .mpg, .mpeg, .wmv), case-insensitive.
#pragma once

#include <filesystem>
#include <string>

namespace xdino::eval::video {

double extract_frames(const std::filesystem::path& video, const std::filesystem::path& dir);
int64_t write_video(const std::filesystem::path& dir, const std::filesystem::path& file, double fps,
                    const std::string& format);
bool is_video_file(const std::filesystem::path& path);

}  // namespace xdino::eval::video
