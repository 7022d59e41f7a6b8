; NVPTX float math through libdevice calls and NVVM intrinsics:
; out[i] = __nv_expf(x) + __nv_powf(x, 1.5) + ex2.approx(x) + rsqrt.approx(x)
;          + fmax(x, 0.5), x = in[i].
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @math(ptr addrspace(1) %out, ptr addrspace(1) %in, i32 %n) {
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
  %pin = getelementptr inbounds float, ptr addrspace(1) %in, i64 %idx
  %x = load float, ptr addrspace(1) %pin, align 4
  %e = call float @__nv_expf(float %x)
  %p = call float @__nv_powf(float %x, float 1.5)
  %e2 = call float @llvm.nvvm.ex2.approx.ftz.f(float %x)
  %rs = call float @llvm.nvvm.rsqrt.approx.f(float %x)
  %mx = call float @llvm.nvvm.fmax.f(float %x, float 0.5)
  %s1 = fadd float %e, %p
  %s2 = fadd float %s1, %e2
  %s3 = fadd float %s2, %rs
  %s4 = fadd float %s3, %mx
  %po = getelementptr inbounds float, ptr addrspace(1) %out, i64 %idx
  store float %s4, ptr addrspace(1) %po, align 4
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare float @__nv_expf(float)
declare float @__nv_powf(float, float)
declare float @llvm.nvvm.ex2.approx.ftz.f(float)
declare float @llvm.nvvm.rsqrt.approx.f(float)
declare float @llvm.nvvm.fmax.f(float, float)
