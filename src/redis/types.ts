import type { Cluster, Redis } from "ioredis";

/** An ioredis `Redis` or `Cluster` that the caller created and owns (the locker never closes it). */
export type RedisClient = Redis | Cluster;
