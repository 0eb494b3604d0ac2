//go:build amd64 && !purego

#include "textflag.h"

// func adamAVX2(p, grad, m, v, po, mo, vo *float32, n int, c *adamConsts) (nonFinite bool)
// The same IEEE operations in the same order as adamGo, 8 lanes at a time
// (VDIVPS and VSQRTPS are correctly rounded, like their scalar forms).
// Reads p, m, v and writes the updates to po, mo, vo (the same arrays for
// an in-place step). On the way it ORs into Y15 the lanes of grad whose
// exponent bits are all set (inf or NaN), so the caller learns whether the
// gradients were finite without reading them a second time.
TEXT ·adamAVX2(SB), NOSPLIT, $0-73
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

loop:
	VMOVUPS   (SI), Y10         // g
	VANDPS    40(AX), Y10, Y14  // exponent bits of g
	VPCMPEQD  40(AX), Y14, Y14  // all set: inf or NaN
	VPOR      Y14, Y15, Y15
	VMULPS  Y10, Y0, Y10   // gi = g*gs
	VMULPS  (R8), Y1, Y11  // b1*m
	VMULPS  Y10, Y2, Y12   // (1-b1)*gi
	VADDPS  Y12, Y11, Y11  // mi
	VMOVUPS Y11, (R11)
	VMULPS  (R9), Y3, Y12  // b2*v
	VMULPS  Y10, Y4, Y13   // (1-b2)*gi
	VMULPS  Y10, Y13, Y13  // ((1-b2)*gi)*gi
	VADDPS  Y13, Y12, Y12  // vi
	VMOVUPS Y12, (R12)
	VDIVPS  Y6, Y12, Y12   // vi/bc2
	VSQRTPS Y12, Y12
	VADDPS  Y7, Y12, Y12   // denom
	VDIVPS  Y5, Y11, Y11   // mi/bc1
	VDIVPS  Y12, Y11, Y11  // (mi/bc1)/denom
	VMOVUPS (DI), Y13      // p
	VMULPS  Y13, Y8, Y14   // wd*p
	VADDPS  Y14, Y11, Y11  // update
	VMULPS  Y11, Y9, Y11   // lr*update
	VSUBPS  Y11, Y13, Y13  // p - lr*update
	VMOVUPS Y13, (R10)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $32, R10
	ADDQ    $32, R11
	ADDQ    $32, R12
	DECQ    CX
	JNZ     loop

done:
	VPTEST Y15, Y15
	SETNE  ret+72(FP)
	VZEROUPPER
	RET
