// The projector runtime's public face; its parts are split by concern in this folder.
export * from '../runtime.ts';
