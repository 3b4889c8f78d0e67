.PHONY: demo demo-experiment test bench unit integration lint bootstrap kafka-start kafka-stop clean

demo:            ## bootstrap, start broker + worker + simulated agents
	bash scripts/demo.sh

demo-experiment: ## the demo with a held-out arm: agents that respond to steering (synthetic), outcomes, the report
	bash scripts/demo.sh --experiment

test:            ## bootstrap, lint, mypy, unit + integration tests (starts its own broker)
	bash scripts/test.sh

bench:           ## bootstrap, then the headline benchmarks (latency, throughput, flat cost, E-traces): one table
	bash scripts/bootstrap.sh && HF_HUB_OFFLINE=1 .venv/bin/python -m bench.headline

unit:
	bash scripts/bootstrap.sh && .venv/bin/python -m pytest -q tests/unit

integration:
	bash scripts/bootstrap.sh && .venv/bin/python -m pytest -q tests/integration

lint:
	.venv/bin/ruff check streams tests bench examples && .venv/bin/ruff format --check streams tests bench examples && .venv/bin/mypy

bootstrap:
	bash scripts/bootstrap.sh

kafka-start:
	bash deploy/kafka/kafka.sh start

kafka-stop:
	bash deploy/kafka/kafka.sh stop

clean:
	bash deploy/kafka/kafka.sh stop || true
	rm -rf .local .venv deploy/kafka/target
