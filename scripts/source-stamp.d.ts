// Types of source-stamp.js (plain JavaScript: the bin and the build run it without a compiler).
export declare const STAMP_FILE: string;
export declare function sourceStamp(root: string): string;
export declare function builtStamp(root: string): string | undefined;
