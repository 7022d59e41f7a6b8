; NVPTX neighbour exchange through shared memory: thread t stores t into
; tile[t], then reads tile[(t + 1) % ntid] through a generic pointer. With
; %sync != 0 a barrier separates the two and out[t] = (t + 1) % ntid;
; without it the read races with the neighbour's store.
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [128 x i32] undef, align 4

define ptx_kernel void @neighbour(ptr addrspace(1) %out, i32 %sync) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %sp = getelementptr inbounds [128 x i32], ptr addrspace(3) @tile, i32 0, i32 %tid
  store i32 %tid, ptr addrspace(3) %sp, align 4, !tessera.op !0
  %do = icmp ne i32 %sync, 0
  br i1 %do, label %bar, label %next

bar:
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  br label %next

next:
  %t1 = add i32 %tid, 1
  %nb = urem i32 %t1, %ntid
  %np = getelementptr inbounds [128 x i32], ptr addrspace(3) @tile, i32 0, i32 %nb
  %gp = addrspacecast ptr addrspace(3) %np to ptr
  %v = load i32, ptr %gp, align 4, !tessera.op !1
  %oidx = zext i32 %tid to i64
  %po = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %oidx
  store i32 %v, ptr addrspace(1) %po, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)

!0 = !{!"store %tile[%t], %t @ racy.cpp:7"}
!1 = !{!"%v = load %tile[(%t + 1) % n] @ racy.cpp:9"}
