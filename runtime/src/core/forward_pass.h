// SPDX-License-Identifier: Apache-2.0
// The forward pass (forward_pass.cpp): the model's layer sequence, written
// once against the ops interface (ops.h) and run by every backend.
#pragma once

#include "mega/mega.hpp"
#include "ops.h"
#include "weights.h"

namespace mega {

// Embedding, every layer, the final norm and the pooling of one span: the
// model's layer sequence, the one place it is written. Returns the first
// step's status that is not ok.
Status forward(Ops& ops, const HParams& hp, const ModelWeights& w, const Span& span);

}  // namespace mega
