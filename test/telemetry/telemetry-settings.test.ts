import { describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { startTelemetry, telemetrySettingsFromEnv } from '../../src/telemetry/index.js';

describe('telemetry settings from the standard OTEL_* variables', () => {
  it('is off by default, and starting it then loads nothing', async () => {
    expect(telemetrySettingsFromEnv({}).enabled).toBe(false);
    const t = await startTelemetry({ env: {} });
    expect(t.enabled).toBe(false);
  });

  it('an OTLP endpoint turns it on, protobuf unless the protocol says json', () => {
    expect(telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({
      enabled: true,
      exporter: 'otlp',
      protocol: 'http/protobuf',
    });
    expect(
      telemetrySettingsFromEnv({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      }),
    ).toMatchObject({ enabled: true, protocol: 'http/json' });
    expect(telemetrySettingsFromEnv({ OTEL_TRACES_EXPORTER: 'console' })).toMatchObject({
      enabled: true,
      exporter: 'console',
    });
  });

  it('OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none win over an endpoint', () => {
    expect(
      telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).enabled,
    ).toBe(false);
    expect(
      telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).enabled,
    ).toBe(false);
  });

  it('an exporter or protocol that is not shipped is a clear configuration error', () => {
    const err = (env: NodeJS.ProcessEnv) => {
      try {
        telemetrySettingsFromEnv(env);
      } catch (e) {
        return e;
      }
      return undefined;
    };
    const zipkin = err({ OTEL_TRACES_EXPORTER: 'zipkin' });
    expect(isCrmSyncError(zipkin, 'CONFIG_INVALID') && zipkin.message).toMatch(
      /OTEL_TRACES_EXPORTER=zipkin is not supported/,
    );
    const grpc = err({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' });
    expect(isCrmSyncError(grpc, 'CONFIG_INVALID') && grpc.message).toMatch(
      /OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/,
    );
  });
});
