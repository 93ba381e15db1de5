// SPDX-License-Identifier: Apache-2.0
// The forward pass (forward_pass.h), for every backend: the embedding, each
// layer's EMA-gated chunk attention and FFN sublayers (prenorm or postnorm),
// the final norm and the pooling, through the ops interface (ops.h).
#include "forward_pass.h"

namespace mega {

namespace {

// Everything after the EMA for rows [r0, r0 + rows) of layer l.
Status layer_pass(Ops& ops, const HParams& hp, const LayerWeights& L, int32_t l, Act in, int64_t r0, int64_t rows) {
  MEGA_TRY(ops.gate_inputs(l, in, r0, rows));
  MEGA_TRY(ops.attention(l, r0, rows));
  MEGA_TRY(ops.gate_output(l, r0, rows));
  if (!hp.prenorm) MEGA_TRY(ops.norm(NormSite::layer, l, Act::x, Act::x, r0, rows));
  if (!L.has_ffn) return Status::ok;
  // the pass's xn rows are free again: the FFN's normalized input goes there
  Act ffn_in = Act::x;
  if (hp.prenorm) {
    MEGA_TRY(ops.norm(NormSite::ffn, l, Act::x, Act::xn, r0, rows));
    ffn_in = Act::xn;
  }
  MEGA_TRY(ops.ffn(l, ffn_in, r0, rows));
  if (!hp.prenorm) MEGA_TRY(ops.norm(NormSite::ffn, l, Act::x, Act::x, r0, rows));
  return Status::ok;
}

}  // namespace

Status forward(Ops& ops, const HParams& hp, const ModelWeights& w, const Span& span) {
  const int64_t rows = span.rows();
  const int64_t pass = ops.pass_rows(span);
  MEGA_TRY(ops.embed(span));
  ops.trace(0, span);
  for (int32_t l = 0; l < hp.n_layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    // postnorm: the layer reads x itself; nothing writes x before the
    // residual, by which time the EMA and v are done with those rows
    Act in = Act::x;
    if (hp.prenorm) {
      MEGA_TRY(ops.norm(NormSite::layer, l, Act::x, Act::xn, 0, rows));
      in = Act::xn;
    }
    MEGA_TRY(ops.ema(l, in, span));
    for (int64_t r0 = 0; r0 < rows; r0 += pass) MEGA_TRY(layer_pass(ops, hp, L, l, in, r0, pass));
    ops.trace(l + 1, span);
  }
  if (w.has_final_norm) MEGA_TRY(ops.norm(NormSite::final, 0, Act::x, Act::x, 0, rows));
  return ops.pool(span);
}

}  // namespace mega
