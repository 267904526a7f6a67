// The rotary position embedding on CUDA, fused (engine/nn/attention.cpp's rotary_apply, GPT-NeoX's
// "rotate half" on the first `dims` of each head's dh dims). For x laid out (B, T, H, dh)
// (a projection's output before the heads are split off), per position t and pair
// (j, j + dims/2), j < dims/2, with the float32 tables c = cos[t, j] and s = sin[t, j]:
//   forward   y_j = x_j·c − x_{j+h}·s,   y_{j+h} = x_{j+h}·c + x_j·s,   y_k = x_k (k ≥ dims)
//   backward  the same with s negated (the rotation's transpose).
// Each product and the sum are rounded to float32 one at a time, as the composition's mul and
// add are (no fused multiply-add), and only then to x's type: in float32 the result is the
// composition's bit for bit, and in bf16 it is the bf16 rounding of the composition's float32
// result (which autocast makes before the attention anyway). One element a thread; the
// composition it replaces (narrow, neg, two cats, two muls, an add, each with its backward)
// writes the tensor about six times. No torch header here or in the .cu.
#pragma once

#include <cstdint>

namespace tfw::rotary_cuda {

enum class Type { f32 = 0, bf16 = 1 };  // of x and y

// Whether this build compiled the kernel (its LibTorch has CUDA).
bool compiled();

// x, y: B·T·H·dh elements, contiguous (B, T, H, dh), on the device; cos, sin: T × dims
// float32 (duplicated halves, as RotaryTable holds them: only the first dims/2 of each row are
// read). inverse: the backward (sin negated). stream: a cudaStream_t. Throws tfw::Error with
// the CUDA error's text when the launch fails.
void rotate(Type type, const void* x, void* y, const float* cos, const float* sin, std::int64_t batch,
            std::int64_t positions, std::int64_t heads, std::int64_t head_dim, std::int64_t dims, bool inverse,
            void* stream);

}  // namespace tfw::rotary_cuda
