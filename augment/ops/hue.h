// The hue rotation of torchvision's PIL adjust_hue: RGB -> Pillow's 8-bit HSV, H += shift
// (mod 256), HSV -> RGB, in place on n interleaved RGB pixels.
//
// Contract: hue_shift_reference transcribes Pillow's rgb2hsv/hsv2rgb (Convert.c) operation by
// operation; hue_shift gives identical bytes, 8 pixels at a time with AVX2 where the CPU has it
// (the reference elsewhere). Thread-safe, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xdino::augment {

void hue_shift_reference(uint8_t* rgb, size_t n, uint8_t shift);
void hue_shift(uint8_t* rgb, size_t n, uint8_t shift);

}  // namespace xdino::augment
