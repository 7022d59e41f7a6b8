; NVPTX inclusive warp prefix sum of i32 with shfl.sync.up.i32p (the
; predicate says whether the source lane exists), and each warp's ballot of
; odd inputs via vote.ballot.sync.
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @warp_scan(ptr addrspace(1) %out, ptr addrspace(1) %ballots, ptr addrspace(1) %in) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %idx = zext i32 %i to i64
  %pin = getelementptr inbounds i32, ptr addrspace(1) %in, i64 %idx
  %v0 = load i32, ptr addrspace(1) %pin, align 4
  br label %loop

loop:
  %d = phi i32 [ 1, %entry ], [ %d2, %loop ]
  %v = phi i32 [ %v0, %entry ], [ %vn, %loop ]
  %r = call { i32, i1 } @llvm.nvvm.shfl.sync.up.i32p(i32 -1, i32 %v, i32 %d, i32 0)
  %rv = extractvalue { i32, i1 } %r, 0
  %rp = extractvalue { i32, i1 } %r, 1
  %add = add i32 %v, %rv
  %vn = select i1 %rp, i32 %add, i32 %v
  %d2 = shl i32 %d, 1
  %more = icmp ult i32 %d2, 32
  br i1 %more, label %loop, label %done

done:
  %po = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %idx
  store i32 %vn, ptr addrspace(1) %po, align 4
  %odd = trunc i32 %v0 to i1
  %bal = call i32 @llvm.nvvm.vote.ballot.sync(i32 -1, i1 %odd)
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %first = icmp eq i32 %lane, 0
  br i1 %first, label %write, label %exit

write:
  %w = lshr i32 %i, 5
  %widx = zext i32 %w to i64
  %pb = getelementptr inbounds i32, ptr addrspace(1) %ballots, i64 %widx
  store i32 %bal, ptr addrspace(1) %pb, align 4
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
