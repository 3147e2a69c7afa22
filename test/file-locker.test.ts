import { lockerContract } from "./contract.js";
import { fileLockerHarness } from "./helpers/file-harness.js";
import { lockAllSuite } from "./lock-all-contract.js";

lockerContract("FileLocker (peer: another FileLocker on the same directory)", fileLockerHarness());
lockAllSuite("FileLocker", fileLockerHarness());
