; NVPTX vector add: out[i] = a[i] + b[i] for i = ctaid.x * ntid.x + tid.x < n.
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @vadd(ptr addrspace(1) noalias %out, ptr addrspace(1) noalias readonly %a,
                             ptr addrspace(1) noalias readonly %b, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %inb = icmp slt i32 %i, %n
  br i1 %inb, label %body, label %exit

body:
  %idx = sext i32 %i to i64
  %pa = getelementptr inbounds float, ptr addrspace(1) %a, i64 %idx
  %pb = getelementptr inbounds float, ptr addrspace(1) %b, i64 %idx
  %va = load float, ptr addrspace(1) %pa, align 4, !tessera.op !0
  %vb = load float, ptr addrspace(1) %pb, align 4, !tessera.op !1
  %s = fadd float %va, %vb
  %po = getelementptr inbounds float, ptr addrspace(1) %out, i64 %idx
  store float %s, ptr addrspace(1) %po, align 4, !tessera.op !2
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

!0 = !{!"%3 = load %a[%i] @ vadd.cpp:12"}
!1 = !{!"%4 = load %b[%i] @ vadd.cpp:13"}
!2 = !{!"store %out[%i], %5 @ vadd.cpp:14"}
