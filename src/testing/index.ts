/**
 * Test helpers for code that locks (the `globallock/testing` entry point): no server, no test
 * runner needed.
 * @packageDocumentation
 */
export { type FaultKind, FaultyLocker } from "./faulty-locker.js";
