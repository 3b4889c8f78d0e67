from __future__ import annotations

from streams.worker.metrics import RENDER_MAX_AGE_S, STAGES, Metrics


def test_metrics_render_at_most_once_per_interval_however_often_scraped():
    m = Metrics()
    first, ctype = m.render(now=10.0)
    assert ctype.startswith("text/plain") and b"rb_internal_errors_total" in first
    m.internal_error("send")
    assert m.render(now=10.0 + RENDER_MAX_AGE_S / 2)[0] is first  # cached: not rendered again
    fresh = m.render(now=10.0 + RENDER_MAX_AGE_S)[0]
    assert b'rb_internal_errors_total{stage="send"} 1.0' in fresh


def test_internal_errors_count_by_stage_from_zero():
    m = Metrics()
    body = m.render(now=0.0)[0].decode()
    for stage in STAGES:
        assert f'rb_internal_errors_total{{stage="{stage}"}} 0.0' in body
    m.internal_error("no-such-stage")  # an unknown stage is counted, as dispatch
    assert 'rb_internal_errors_total{stage="dispatch"} 1.0' in m.render(now=5.0)[0].decode()


def test_the_registry_reports_the_process_memory_and_cpu() -> None:
    from streams.worker.metrics import Metrics

    m = Metrics()
    assert (m.registry.get_sample_value("process_resident_memory_bytes") or 0) > 10_000_000
    assert m.registry.get_sample_value("process_cpu_seconds_total") is not None
    body, _ = m.render()
    assert b"python_info" in body
