; The second reads of special registers that the rematerialisation after
; loops emits (codegen/nvptx/NVPTXSpecialRegisters.h), as inline assembly:
; out[6 * i + k] = tid.x, tid.y, ctaid.x, ctaid.y, ntid.x, nctaid.x of
; thread i = (ctaid.y * nctaid.x + ctaid.x) * ntid.x + tid.x (tid.y is 0).
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @reread(ptr addrspace(1) noalias %out) {
entry:
  %tx = call i32 asm "mov.u32 $0, %tid.x;", "=r"()
  %ty = call i32 asm "mov.u32 $0, %tid.y;", "=r"()
  %cx = call i32 asm "mov.u32 $0, %ctaid.x;", "=r"()
  %cy = call i32 asm "mov.u32 $0, %ctaid.y;", "=r"()
  %nt = call i32 asm "mov.u32 $0, %ntid.x;", "=r"()
  %nc = call i32 asm "mov.u32 $0, %nctaid.x;", "=r"()
  %row = mul i32 %cy, %nc
  %blk = add i32 %row, %cx
  %first = mul i32 %blk, %nt
  %i = add i32 %first, %tx
  %i6 = mul i32 %i, 6
  %base = sext i32 %i6 to i64
  %p0 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %base
  store i32 %tx, ptr addrspace(1) %p0, align 4, !tessera.op !0
  %p1 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 1
  store i32 %ty, ptr addrspace(1) %p1, align 4, !tessera.op !0
  %p2 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 2
  store i32 %cx, ptr addrspace(1) %p2, align 4, !tessera.op !0
  %p3 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 3
  store i32 %cy, ptr addrspace(1) %p3, align 4, !tessera.op !0
  %p4 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 4
  store i32 %nt, ptr addrspace(1) %p4, align 4, !tessera.op !0
  %p5 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 5
  store i32 %nc, ptr addrspace(1) %p5, align 4, !tessera.op !0
  ret void
}

!0 = !{!"store %out[6 i + k] @ reread.cpp:1"}
