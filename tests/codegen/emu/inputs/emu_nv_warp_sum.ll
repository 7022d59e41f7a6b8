; NVPTX warp reduction: butterfly with shfl.sync.bfly.f32; lane 0 of each
; warp writes its warp's sum to sums[warp].
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @warp_sum(ptr addrspace(1) %sums, ptr addrspace(1) %in) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %idx = zext i32 %i to i64
  %pin = getelementptr inbounds float, ptr addrspace(1) %in, i64 %idx
  %v0 = load float, ptr addrspace(1) %pin, align 4
  %r16 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v0, i32 16, i32 31)
  %v1 = fadd float %v0, %r16
  %r8 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v1, i32 8, i32 31)
  %v2 = fadd float %v1, %r8
  %r4 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v2, i32 4, i32 31)
  %v3 = fadd float %v2, %r4
  %r2 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v3, i32 2, i32 31)
  %v4 = fadd float %v3, %r2
  %r1 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v4, i32 1, i32 31)
  %v5 = fadd float %v4, %r1
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %first = icmp eq i32 %lane, 0
  br i1 %first, label %write, label %exit

write:
  %ws = call i32 @llvm.nvvm.read.ptx.sreg.warpsize()
  %w = udiv i32 %i, %ws
  %widx = zext i32 %w to i64
  %po = getelementptr inbounds float, ptr addrspace(1) %sums, i64 %widx
  store float %v5, ptr addrspace(1) %po, align 4
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.laneid()
declare i32 @llvm.nvvm.read.ptx.sreg.warpsize()
declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)
declare { i32, i1 } @llvm.nvvm.shfl.sync.up.i32p(i32, i32, i32, i32)
declare i32 @llvm.nvvm.vote.ballot.sync(i32, i1)
