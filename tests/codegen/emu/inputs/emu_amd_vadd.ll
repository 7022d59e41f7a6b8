; AMDGPU grid-stride vector add, written the way clang emits HIP: the block
; size comes from the hidden kernel arguments (implicitarg.ptr + 12, u16) and
; the grid size in work items from the dispatch packet (dispatch.ptr + 12,
; u32). out[i] = a[i] + b[i] for every i < n, whatever the grid.
target datalayout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"
target triple = "amdgcn-amd-amdhsa"

define amdgpu_kernel void @vadd(ptr addrspace(1) noalias %out, ptr addrspace(1) noalias readonly %a,
                                ptr addrspace(1) noalias readonly %b, i32 %n) #0 {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %bid = call i32 @llvm.amdgcn.workgroup.id.x()
  %ia = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %bsp = getelementptr inbounds i8, ptr addrspace(4) %ia, i64 12
  %bs16 = load i16, ptr addrspace(4) %bsp, align 4, !invariant.load !{}
  %bs = zext i16 %bs16 to i32
  %dp = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %gsp = getelementptr inbounds i8, ptr addrspace(4) %dp, i64 12
  %gs = load i32, ptr addrspace(4) %gsp, align 4, !invariant.load !{}
  %base = mul i32 %bid, %bs
  %i0 = add i32 %base, %tid
  br label %loop

loop:
  %i = phi i32 [ %i0, %entry ], [ %inext, %body ]
  %inb = icmp slt i32 %i, %n
  br i1 %inb, label %body, label %exit

body:
  %idx = sext i32 %i to i64
  %pa = getelementptr inbounds float, ptr addrspace(1) %a, i64 %idx
  %pb = getelementptr inbounds float, ptr addrspace(1) %b, i64 %idx
  %va = load float, ptr addrspace(1) %pa, align 4
  %vb = load float, ptr addrspace(1) %pb, align 4
  %s = fadd float %va, %vb
  %po = getelementptr inbounds float, ptr addrspace(1) %out, i64 %idx
  store float %s, ptr addrspace(1) %po, align 4
  %inext = add i32 %i, %gs
  br label %loop

exit:
  ret void
}

declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()

attributes #0 = { "amdgpu-flat-work-group-size"="1,256" "target-cpu"="gfx942" "uniform-work-group-size"="true" }

!llvm.module.flags = !{!0}
!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}
