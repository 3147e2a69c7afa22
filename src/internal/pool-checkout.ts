/**
 * Waits at most `timeout` ms for a connection a pool is `connecting`; one that arrives later goes
 * straight back to the pool (`release()`). Rejects with the pool's error, or with "no connection
 * from the pool within … ms (is the pool exhausted, or `store` unreachable?)".
 */
export async function checkOutWithin<Connection extends { release(): void }>(
  connecting: Promise<Connection>,
  timeout: number,
  store: string,
): Promise<Connection> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<Connection>((resolve, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `no connection from the pool within ${timeout} ms (is the pool exhausted, or ${store} unreachable?)`,
            ),
          ),
        timeout,
      );
      connecting.then(resolve, reject);
    });
  } catch (error) {
    connecting.then(
      (late) => late.release(),
      () => undefined,
    );
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
