//go:build amd64 && !purego

#include "textflag.h"

// ADAM_BLOCK updates the 8 lanes at the pointers and advances them; STORE
// writes an output (VMOVUPS, or VMOVNTPS to bypass the cache).
#define ADAM_BLOCK(STORE) \
	VMOVUPS   (SI), Y10; \
	VANDPS    40(AX), Y10, Y14; \
	VPCMPEQD  40(AX), Y14, Y14; \
	VPOR      Y14, Y15, Y15; \
	VMULPS  Y10, Y0, Y10; \
	VMULPS  (R8), Y1, Y11; \
	VMULPS  Y10, Y2, Y12; \
	VADDPS  Y12, Y11, Y11; \
	STORE Y11, (R11); \
	VMULPS  (R9), Y3, Y12; \
	VMULPS  Y10, Y4, Y13; \
	VMULPS  Y10, Y13, Y13; \
	VADDPS  Y13, Y12, Y12; \
	STORE Y12, (R12); \
	VDIVPS  Y6, Y12, Y12; \
	VSQRTPS Y12, Y12; \
	VADDPS  Y7, Y12, Y12; \
	VDIVPS  Y5, Y11, Y11; \
	VDIVPS  Y12, Y11, Y11; \
	VMOVUPS (DI), Y13; \
	VMULPS  Y13, Y8, Y14; \
	VADDPS  Y14, Y11, Y11; \
	VMULPS  Y11, Y9, Y11; \
	VSUBPS  Y11, Y13, Y13; \
	STORE Y13, (R10); \
	ADDQ    $32, DI; \
	ADDQ    $32, SI; \
	ADDQ    $32, R8; \
	ADDQ    $32, R9; \
	ADDQ    $32, R10; \
	ADDQ    $32, R11; \
	ADDQ    $32, R12

// func adamAVX2(p, grad, m, v, po, mo, vo *float32, n int, c *adamConsts, stream bool) (nonFinite bool)
// The same IEEE operations in the same order as adamGo, 8 lanes at a time
// (VDIVPS and VSQRTPS are correctly rounded, like their scalar forms).
// Reads p, m, v and writes the updates to po, mo, vo (the same arrays for
// an in-place step). On the way it ORs into Y15 the lanes of grad whose
// exponent bits are all set (inf or NaN), so the caller learns whether the
// gradients were finite without reading them a second time.
TEXT ·adamAVX2(SB), NOSPLIT, $0-81
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ po+32(FP), R10
	MOVQ mo+40(FP), R11
	MOVQ vo+48(FP), R12
	MOVQ n+56(FP), CX
	MOVQ c+64(FP), AX
	VBROADCASTSS 0(AX), Y0  // gs
	VBROADCASTSS 4(AX), Y1  // b1
	VBROADCASTSS 8(AX), Y2  // 1-b1
	VBROADCASTSS 12(AX), Y3 // b2
	VBROADCASTSS 16(AX), Y4 // 1-b2
	VBROADCASTSS 20(AX), Y5 // bc1
	VBROADCASTSS 24(AX), Y6 // bc2
	VBROADCASTSS 28(AX), Y7 // eps
	VBROADCASTSS 32(AX), Y8 // wd
	VBROADCASTSS 36(AX), Y9 // lr
	VPXOR Y15, Y15, Y15     // non-finite lanes seen
	SHRQ $3, CX
	JZ   done

	CMPB stream+72(FP), $0
	JNE  ntloop

loop:
	ADAM_BLOCK(VMOVUPS)
	DECQ CX
	JNZ  loop
	JMP  done

// Out of place, the outputs are not read again before the next step: the
// non-temporal stores skip the read for ownership of every output line
// (12 of the 40 bytes an element costs the memory otherwise).
ntloop:
	ADAM_BLOCK(VMOVNTPS)
	DECQ CX
	JNZ  ntloop
	SFENCE // the streamed stores are visible before the caller signals anyone

done:
	VPTEST Y15, Y15
	SETNE  ret+80(FP)
	VZEROUPPER
	RET
