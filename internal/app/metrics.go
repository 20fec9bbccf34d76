package app

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// temporalLatencyBuckets are the buckets of the Temporal SDK's timers, in
// seconds (OpenTelemetry's default buckets are meant for milliseconds).
var temporalLatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// TemporalMetrics returns a Temporal client metrics handler whose metrics
// (temporal_request_total, temporal_request_latency_seconds, worker poll
// and task metrics, ...) are collected on reg, through OpenTelemetry's
// Prometheus exporter. A metric the SDK cannot record is logged, never
// fatal.
func TemporalMetrics(reg prometheus.Registerer, log *slog.Logger) (client.MetricsHandler, error) {
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("temporal metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: temporalLatencyBuckets}},
	)))
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                mp.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		OnError:              func(err error) { log.Warn("temporal metrics", "error", err) },
	}), nil
}
