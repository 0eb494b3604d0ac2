//go:build amd64 && !purego

#include "textflag.h"

// func roundF16F16C(dst, src *float32, n int)
// dst[i] = src[i] rounded to the nearest fp16 value (ties to even), for
// n/8 blocks of 8: VCVTPS2PH with immediate 0 rounds to nearest even and
// produces fp16 subnormals, infinities and quiet NaNs the way
// kernels.RoundF16 does; VCVTPH2PS widens exactly.
TEXT ·roundF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done

loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VCVTPH2PS X1, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

// func cpuidECX1() uint32
// The ECX word of CPUID leaf 1 (bit 29: F16C).
TEXT ·cpuidECX1(SB), NOSPLIT, $0-4
	MOVL $1, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
