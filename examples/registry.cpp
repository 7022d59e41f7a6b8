#include "registry.h"

namespace tessera::examples {

const std::vector<Example>& all() {
  static const std::vector<Example> list = {
      vectorAddExample(),
      biasGeluExample(),
      softmaxExample(),
      layernormExample(),
      rmsnormExample(),
      rmsnormClusterExample(),
      gemmF32Example(),
      gemmF16Example(),
      gemmBF16Example(),
      gemmFP8Example(),
      gemmInt8Example(),
      gemmBatchedExample(),
      gemmSplitKExample(),
      tutorialSoftmaxExample(),
      tutorialGemmExample(),
      tpMlpExample(),
      spRmsnormExample(),
      dropoutResidualLayernormExample(),
      flashAttentionExample(),
      flashAttentionCausalExample(),
      flashAttentionBF16Example(),
      flashAttentionCausalBF16Example(),
      flashAttentionVarlenExample(),
      flashAttentionBackwardExample(),
      flashAttentionBackwardCausalExample(),
      ropeExample(),
      crossEntropyExample(),
      pagedDecodeAttentionExample(),
      moeGroupedGemmExample(),
      moeGroupedGemmSwigluExample(),
      gemmMXFP8Example(),
      gemmMXFP4Example(),
      gemmNVFP4Example(),
      mxQuantizeExample(),
      nvfp4QuantizeExample(),
      mxfp8QuantizeExample(),
      mxfp6QuantizeExample(),
      gemmQuantMXFP8Example(),
      mxDequantizeExample(),
  };
  return list;
}

const Example* find(const std::string& name) {
  for (const auto& e : all())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace tessera::examples
