// SPDX-License-Identifier: Apache-2.0
// The teacher front end's kernels (teacher.cuh): grid-stride launches of its
// element functions, one thread per work item.
#include "launch.cuh"
#include "teacher.cuh"

namespace mega::gpu {

int launch_teacher_mel(const TeacherMelParams& p, CUstream_st* stream) {
  const int e = launch_each<TeacherMelParams, teacher_power_element>(p, teacher_frames(p) * teacher::kBins, stream);
  if (e != int(cudaSuccess)) return e;
  return launch_each<TeacherMelParams, teacher_db_element>(p, teacher_frames(p) * teacher::kMel, stream);
}

int launch_teacher_floor(const TeacherFloorParams& p, CUstream_st* stream) {
  return launch_each<TeacherFloorParams, teacher_floor_element>(p, p.n_steps, stream);
}

int launch_teacher_conv(const TeacherConvParams& p, CUstream_st* stream) {
  return launch_each<TeacherConvParams, teacher_conv_element>(p, teacher_conv_size(p), stream);
}

int launch_teacher_pool(const TeacherPoolParams& p, CUstream_st* stream) {
  return launch_each<TeacherPoolParams, teacher_pool_element>(p, teacher_pool_size(p), stream);
}

template <typename T>
int launch_teacher_project(const TeacherProjectParams<T>& p, CUstream_st* stream) {
  return launch_each<TeacherProjectParams<T>, teacher_project_element<T>>(p, p.rows * p.d, stream);
}

template int launch_teacher_project<float>(const TeacherProjectParams<float>&, CUstream_st*);
template int launch_teacher_project<__half>(const TeacherProjectParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
