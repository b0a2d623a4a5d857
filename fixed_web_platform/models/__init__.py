"""What every model-running workload kind shares: where a model comes from offline and which
architecture it is (source), the precision rules (rules), the bytes a run holds (quantized), the
texts and token ids (inputs), int8-activation calibration (calibration), and which layers can take
fewer bits (sensitivity, plan_search). Architectures are in architectures/, kinds in workloads/."""
