/** Error-code check for pidfiles and the lock; file writes and reads are the shared ones in src/files.ts. */

export function isErrno(error: unknown, code: string): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code;
}
