"""Parses a metrics exposition (the file named by argv[1]) with the official Prometheus client's OpenMetrics
parser and prints one JSON object: each family's type, help, and samples summed by name."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = {}
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    samples = {}
    for s in family.samples:
        samples[s.name] = samples.get(s.name, 0) + s.value
    families[family.name] = {"type": family.type, "help": family.documentation, "samples": samples}
print(json.dumps(families))
