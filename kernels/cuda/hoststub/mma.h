#pragma once
#include "cuda_stub.h"
namespace nvcuda { namespace wmma {
struct row_major {}; struct col_major {};
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class L = void> struct fragment { float x[8]; };
template <class F, class V> void fill_fragment(F&, V) {}
template <class F, class P> void load_matrix_sync(F&, const P*, unsigned) {}
template <class F> void store_matrix_sync(float*, const F&, unsigned, layout_t) {}
template <class A, class B, class C> void mma_sync(C&, const A&, const B&, const C&) {}
float __float_to_tf32(float);
}}
