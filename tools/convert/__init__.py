"""The converter: mega_torch (the PyTorch reference model), mega_convert
(checkpoint -> .mega), mega_unpack (.mega -> checkpoint), mega_format (the
file's schema version and trailer), generated (flatc's code for
formats/mega_model.fbs)."""
