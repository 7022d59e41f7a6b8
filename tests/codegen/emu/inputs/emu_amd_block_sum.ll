; AMDGPU block reduction through LDS with s_barrier (fenced as clang emits
; __syncthreads): out[bid] = sum of the block's elements of in (zero past n).
; The LDS address is also taken as an integer (ptrtoint to the 32-bit LDS
; offset) and rebuilt, as LDS pointer arithmetic may be.
target datalayout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"
target triple = "amdgcn-amd-amdhsa"

@lds = internal addrspace(3) global [256 x float] poison, align 16

define amdgpu_kernel void @block_sum(ptr addrspace(1) %out, ptr addrspace(1) %in, i32 %n) #0 {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %bid = call i32 @llvm.amdgcn.workgroup.id.x()
  %ia = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %bsp = getelementptr inbounds i8, ptr addrspace(4) %ia, i64 12
  %bs16 = load i16, ptr addrspace(4) %bsp, align 4
  %bs = zext i16 %bs16 to i32
  %base = mul i32 %bid, %bs
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
  %ldsoff = ptrtoint ptr addrspace(3) @lds to i32
  %toff = shl i32 %tid, 2
  %myoff = add i32 %ldsoff, %toff
  %sp = inttoptr i32 %myoff to ptr addrspace(3)
  store float %v, ptr addrspace(3) %sp, align 4
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %s0 = lshr i32 %bs, 1
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
  %op = getelementptr inbounds [256 x float], ptr addrspace(3) @lds, i32 0, i32 %o
  %a = load float, ptr addrspace(3) %op, align 4
  %b = load float, ptr addrspace(3) %sp, align 4
  %sum = fadd float %a, %b
  store float %sum, ptr addrspace(3) %sp, align 4
  br label %sync

sync:
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %s2 = lshr i32 %s, 1
  br label %loop

done:
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %write, label %exit

write:
  %r = load float, ptr addrspace(3) @lds, align 16
  %bidx = zext i32 %bid to i64
  %po = getelementptr inbounds float, ptr addrspace(1) %out, i64 %bidx
  store float %r, ptr addrspace(1) %po, align 4
  br label %exit

exit:
  ret void
}

declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
declare void @llvm.amdgcn.s.barrier()

attributes #0 = { "amdgpu-flat-work-group-size"="1,256" "target-cpu"="gfx942" }

!llvm.module.flags = !{!0}
!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}
