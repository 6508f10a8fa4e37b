/**
 * A context value that exists but that the evaluator cannot know yet: the workflow of a budget
 * whose state a proxy has not heard. Every condition on it takes the fail-closed answer, as one on
 * a value of an unreadable shape does: a deny, a warning or an approval holds, an allow does not.
 * It has no JSON (a context written out, for a reviewer or a judge, leaves it out), and no input
 * can make it: only code that knows the value exists puts it in a context.
 */
export const UNKNOWN_VALUE: object = Object.freeze({ toJSON: () => undefined });
