// SPDX-License-Identifier: Apache-2.0
// What the loader's stages share (model.cpp: the container, the metadata, the
// self-test; model_tensors.cpp: the tensors): the first error, and the
// tensor stage's entry point.
#pragma once

#include <string>

#include "mega/mega.hpp"
#include "model_data.h"

namespace mega {
namespace fb {
struct Model;
}  // namespace fb

// The first failure of a load; later ones are ignored (the first names the culprit).
struct LoadError {
  Status status = Status::ok;
  std::string message;
  bool failed() const { return status != Status::ok; }
  bool set(Status s, std::string m) {
    if (!failed()) {
      status = s;
      message = std::move(m);
    }
    return false;
  }
};

// The tensors of m into md, checked against md->info.hparams (read before).
bool load_tensors(const fb::Model* m, ModelData* md, LoadError* err);

}  // namespace mega
