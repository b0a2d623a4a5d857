"""Weight file formats read (and written) by the harness itself, below the architectures that map
their names: CTranslate2's model.bin (ctranslate2.py) and one shared parse per GGUF file
(gguf_reads.py). models/source.py decides which format a model folder holds."""
