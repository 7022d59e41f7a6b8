; The lane exchanges the AMDGPU lowering's butterflies use, each with its
; value being the lane's own thread id: DPP quad_perm [1,0,3,2] and
; [2,3,0,1], DPP row_xmask:4 and :8, ds_swizzle in bitmask mode with xor 16,
; v_permlanex16 with the identity selects, and DPP row_half_mirror and
; row_mirror (gfx9's exchanges between uniform groups of 4 and 8 lanes).
; Thread t writes what it received from each to out[8 t ...]: t ^ 1, t ^ 2,
; t ^ 4, t ^ 8, t ^ 16, t ^ 16, t ^ 7, t ^ 15.
target datalayout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"
target triple = "amdgcn-amd-amdhsa"

define amdgpu_kernel void @lane_xor(ptr addrspace(1) %out) #0 {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %x1 = call i32 @llvm.amdgcn.update.dpp.i32(i32 %tid, i32 %tid, i32 177, i32 15, i32 15, i1 false)
  %x2 = call i32 @llvm.amdgcn.update.dpp.i32(i32 %tid, i32 %tid, i32 78, i32 15, i32 15, i1 false)
  %x4 = call i32 @llvm.amdgcn.update.dpp.i32(i32 %tid, i32 %tid, i32 356, i32 15, i32 15, i1 false)
  %x8 = call i32 @llvm.amdgcn.update.dpp.i32(i32 %tid, i32 %tid, i32 360, i32 15, i32 15, i1 false)
  %x16 = call i32 @llvm.amdgcn.ds.swizzle(i32 %tid, i32 16415)
  %p16 = call i32 @llvm.amdgcn.permlanex16.i32(i32 %tid, i32 %tid, i32 1985229328, i32 -19088744, i1 false, i1 false)
  %hm = call i32 @llvm.amdgcn.update.dpp.i32(i32 poison, i32 %tid, i32 321, i32 15, i32 15, i1 true)
  %mi = call i32 @llvm.amdgcn.update.dpp.i32(i32 poison, i32 %tid, i32 320, i32 15, i32 15, i1 true)
  %base = mul i32 %tid, 8
  %b64 = zext i32 %base to i64
  %p0 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %b64
  store i32 %x1, ptr addrspace(1) %p0, align 4
  %p1 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 1
  store i32 %x2, ptr addrspace(1) %p1, align 4
  %p2 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 2
  store i32 %x4, ptr addrspace(1) %p2, align 4
  %p3 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 3
  store i32 %x8, ptr addrspace(1) %p3, align 4
  %p4 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 4
  store i32 %x16, ptr addrspace(1) %p4, align 4
  %p5 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 5
  store i32 %p16, ptr addrspace(1) %p5, align 4
  %p6 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 6
  store i32 %hm, ptr addrspace(1) %p6, align 4
  %p7 = getelementptr inbounds i32, ptr addrspace(1) %p0, i64 7
  store i32 %mi, ptr addrspace(1) %p7, align 4
  ret void
}

declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.update.dpp.i32(i32, i32, i32 immarg, i32 immarg, i32 immarg, i1 immarg)
declare i32 @llvm.amdgcn.ds.swizzle(i32, i32 immarg)
declare i32 @llvm.amdgcn.permlanex16.i32(i32, i32, i32, i32, i1 immarg, i1 immarg)

attributes #0 = { "amdgpu-flat-work-group-size"="1,256" }
