"""Experiments and simulation: specs, workloads (SWIM traces too), the simulator, a live
run on a local cluster, results, plots and the ideal they are measured against."""
