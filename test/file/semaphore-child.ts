/** A FileSemaphore in a child process (see remote-child.ts); options: FileSemaphoreOptions. */
import { FileSemaphore, type FileSemaphoreOptions } from "../../src/file/file-semaphore.js";
import { serve } from "./remote-child.js";

serve((options) => new FileSemaphore(options as FileSemaphoreOptions));
