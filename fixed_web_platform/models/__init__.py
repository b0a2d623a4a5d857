"""What every model-running workload kind shares: where a model comes from offline and which
architecture it is (source), the precision rules (rules), the bytes a run holds (quantized), the
texts and token ids (inputs) and int8-activation calibration (calibration). Architectures are in
architectures/, kinds in workloads/ (an encoder's sensitivity probes and plan search in
workloads/encoder/)."""
