"""Example jobs, installed with the package so that a job pod can import them (entrypoints
`sparkpoint.examples.windowed_aggregation:build` and `sparkpoint.examples.sessionization:build`);
examples/*.yaml run them."""
