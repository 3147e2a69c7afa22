/** A FileLocker in a child process (see test/helpers/remote-child.ts); options: FileLockerOptions. */
import { FileLocker } from "../../src/file/file-locker.js";
import type { FileLockerOptions } from "../../src/file/options.js";
import { serve } from "../helpers/remote-child.js";

serve((options) => new FileLocker(options as FileLockerOptions));
