; AMDGPU wave reduction with ds_bpermute, for wave64 and wave32 alike: the
; lane id comes from mbcnt.lo/hi, the wave size from wavefrontsize, and
; lane 0 writes sums[global id / wave size]. Each wave's ballot of positive
; inputs (ballot.i64) and lane 0's input broadcast by readfirstlane and by
; readlane(…, 0) check the other AMD wave operations.
target datalayout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"
target triple = "amdgcn-amd-amdhsa"

define amdgpu_kernel void @wave_sum(ptr addrspace(1) %sums, ptr addrspace(1) %ballots,
                                    ptr addrspace(1) %firsts, ptr addrspace(1) %in) #0 {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %bid = call i32 @llvm.amdgcn.workgroup.id.x()
  %ia = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %bsp = getelementptr inbounds i8, ptr addrspace(4) %ia, i64 12
  %bs16 = load i16, ptr addrspace(4) %bsp, align 4
  %bs = zext i16 %bs16 to i32
  %base = mul i32 %bid, %bs
  %i = add i32 %base, %tid
  %idx = zext i32 %i to i64
  %pin = getelementptr inbounds float, ptr addrspace(1) %in, i64 %idx
  %v0 = load float, ptr addrspace(1) %pin, align 4
  %lo = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)
  %lane = call i32 @llvm.amdgcn.mbcnt.hi(i32 -1, i32 %lo)
  %ws = call i32 @llvm.amdgcn.wavefrontsize()
  %off0 = lshr i32 %ws, 1
  br label %loop

loop:
  %off = phi i32 [ %off0, %entry ], [ %off2, %loop ]
  %v = phi float [ %v0, %entry ], [ %vn, %loop ]
  %src = xor i32 %lane, %off
  %addr = shl i32 %src, 2
  %vb = bitcast float %v to i32
  %ob = call i32 @llvm.amdgcn.ds.bpermute(i32 %addr, i32 %vb)
  %o = bitcast i32 %ob to float
  %vn = fadd float %v, %o
  %off2 = lshr i32 %off, 1
  %more = icmp ugt i32 %off2, 0
  br i1 %more, label %loop, label %done

done:
  %pos = fcmp ogt float %v0, 0.0
  %bal = call i64 @llvm.amdgcn.ballot.i64(i1 %pos)
  %f1 = call float @llvm.amdgcn.readfirstlane.f32(float %v0)
  %f2 = call float @llvm.amdgcn.readlane.f32(float %v0, i32 0)
  %first = icmp eq i32 %lane, 0
  br i1 %first, label %write, label %exit

write:
  %w = udiv i32 %i, %ws
  %widx = zext i32 %w to i64
  %ps = getelementptr inbounds float, ptr addrspace(1) %sums, i64 %widx
  store float %vn, ptr addrspace(1) %ps, align 4
  %pb = getelementptr inbounds i64, ptr addrspace(1) %ballots, i64 %widx
  store i64 %bal, ptr addrspace(1) %pb, align 8
  %w2 = shl i64 %widx, 1
  %pf = getelementptr inbounds float, ptr addrspace(1) %firsts, i64 %w2
  store float %f1, ptr addrspace(1) %pf, align 4
  %pf2 = getelementptr inbounds float, ptr addrspace(1) %pf, i64 1
  store float %f2, ptr addrspace(1) %pf2, align 4
  br label %exit

exit:
  ret void
}

declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)
declare i32 @llvm.amdgcn.mbcnt.hi(i32, i32)
declare i32 @llvm.amdgcn.wavefrontsize()
declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)
declare i64 @llvm.amdgcn.ballot.i64(i1)
declare float @llvm.amdgcn.readfirstlane.f32(float)
declare float @llvm.amdgcn.readlane.f32(float, i32)

attributes #0 = { "amdgpu-flat-work-group-size"="1,256" }

!llvm.module.flags = !{!0}
!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}
