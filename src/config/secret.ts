import { inspect } from 'node:util';

const REDACTED = '[redacted]';

/**
 * Holds an API key or token so that it cannot leak by accident: string conversion, JSON,
 * util.inspect (and so pino and console.log) all print `[redacted]`. Only `reveal()` gives the
 * value, and it is called in exactly the places that put the key on the wire.
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return `Secret(${REDACTED})`;
  }
}
