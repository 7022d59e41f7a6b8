; NVPTX block reduction through shared memory: out[ctaid] = sum of the
; block's elements of in (zero past n). Tree reduction with a barrier per
; step; the first barrier is the legacy barrier0 spelling, the others the
; barrier.cta.sync form current LLVM emits.
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@sdata = internal addrspace(3) global [256 x float] undef, align 4

define ptx_kernel void @block_sum(ptr addrspace(1) %out, ptr addrspace(1) %in, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %inb = icmp slt i32 %i, %n
  br i1 %inb, label %ld, label %join

ld:
  %idx = sext i32 %i to i64
  %pin = getelementptr inbounds float, ptr addrspace(1) %in, i64 %idx
  %x = load float, ptr addrspace(1) %pin, align 4
  br label %join

join:
  %v = phi float [ %x, %ld ], [ 0.0, %entry ]
  %sp = getelementptr inbounds [256 x float], ptr addrspace(3) @sdata, i32 0, i32 %tid
  store float %v, ptr addrspace(3) %sp, align 4
  call void @llvm.nvvm.barrier0()
  %s0 = lshr i32 %ntid, 1
  br label %loop

loop:
  %s = phi i32 [ %s0, %join ], [ %s2, %sync ]
  %more = icmp ugt i32 %s, 0
  br i1 %more, label %step, label %done

step:
  %active = icmp ult i32 %tid, %s
  br i1 %active, label %add, label %sync

add:
  %o = add i32 %tid, %s
  %op = getelementptr inbounds [256 x float], ptr addrspace(3) @sdata, i32 0, i32 %o
  %a = load float, ptr addrspace(3) %op, align 4
  %b = load float, ptr addrspace(3) %sp, align 4
  %sum = fadd float %a, %b
  store float %sum, ptr addrspace(3) %sp, align 4
  br label %sync

sync:
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  %s2 = lshr i32 %s, 1
  br label %loop

done:
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %write, label %exit

write:
  %r = load float, ptr addrspace(3) getelementptr inbounds ([256 x float], ptr addrspace(3) @sdata, i32 0, i32 0), align 4
  %bidx = zext i32 %ctaid to i64
  %po = getelementptr inbounds float, ptr addrspace(1) %out, i64 %bidx
  store float %r, ptr addrspace(1) %po, align 4
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare void @llvm.nvvm.barrier0()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)
