// A DSL header with a function its reference (reference.md) does not name.
#pragma once

namespace tessera {

class Tensor {};
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor documented(const Tensor& x);
Tensor frobnicate(const Tensor& x);

namespace dsl {
Tensor internalHelper(const Tensor& x);  // internal: need not be documented
}  // namespace dsl

}  // namespace tessera
