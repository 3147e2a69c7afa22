/** A FileSemaphore in a child process (see test/helpers/remote-child.ts); options: FileSemaphoreOptions. */
import { FileSemaphore, type FileSemaphoreOptions } from "../../src/file/file-semaphore.js";
import { serve } from "../helpers/remote-child.js";

serve((options) => new FileSemaphore(options as FileSemaphoreOptions));
