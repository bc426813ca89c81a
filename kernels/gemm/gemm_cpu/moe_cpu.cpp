// CPU paths of the mixture-of-experts routing and combine (gemm_common/moe_args.h). The grouped
// GEMM runs as one gemm_cpu call per expert (the binding's loop).
#include <algorithm>
#include <vector>

#include "gemm_common/launchers.h"
#include "gemm_common/moe_args.h"

namespace fp8gemm {

Status route_cpu(const RouteArgs& args) {
  std::vector<int32_t> counts(size_t(args.experts), 0);
  for (int64_t s = 0; s < args.slots(); ++s) {
    const int64_t id = load_id(args, s);
    if (id >= 0 && id < args.experts) ++counts[size_t(id)];
  }
  int32_t total = 0;
  for (int32_t e = 0; e < args.experts; ++e) {
    args.offsets[e] = total;
    total += counts[size_t(e)];
    counts[size_t(e)] = args.offsets[e];  // from here on: the next free row of expert e
  }
  args.offsets[args.experts] = total;
  if (args.active != nullptr) {
    int32_t owning = 0;
    for (int32_t e = 0; e < args.experts; ++e)
      if (args.offsets[e + 1] > args.offsets[e]) args.active[1 + owning++] = e;
    args.active[0] = owning;
  }
  for (int64_t s = 0; s < args.slots(); ++s) {
    const int64_t id = load_id(args, s);
    if (id < 0 || id >= args.experts) {
      args.slot_row[s] = -1;
      continue;
    }
    const int32_t row = counts[size_t(id)]++;
    if (args.row_token != nullptr) args.row_token[row] = int32_t(s / args.top_k);
    args.slot_row[s] = row;
  }
  return kOk;
}

Status combine_cpu(const CombineArgs& args) {
  std::vector<float> acc(size_t(args.hidden));
  for (int64_t t = 0; t < args.tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int32_t j = 0; j < args.top_k; ++j) {
      const int32_t row = args.slot_row[t * args.top_k + j];
      if (row < 0 || row >= args.row_count) continue;
      const float w = load_weight(args, t, j);
      const uint16_t* values = args.rows + row * args.rows_stride;
      for (int64_t h = 0; h < args.hidden; ++h) acc[size_t(h)] += w * bf16_to_float(values[h]);
    }
    for (int64_t h = 0; h < args.hidden; ++h) store_combined(args, t, h, acc[size_t(h)]);
  }
  return kOk;
}

}  // namespace fp8gemm
