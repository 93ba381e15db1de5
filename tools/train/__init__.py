"""Training: train (the model), tune_detection (detection defaults on a
validation stream), evaluate (a .mega model through the shipped runtime),
streamscore (the detector and scoring both share)."""
