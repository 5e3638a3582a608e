// What one pemja interpreter leaves behind once closed (issue 37): bench/pemja_leak.py runs it.

import pemja.core.PythonInterpreter;
import pemja.core.PythonInterpreterConfig;

public class PemjaInterpreterLeak {
    /** A Java object as PyFlink hands its contexts to Python: one overloaded method. */
    public static class Context {
        public int emit(int value) {
            return value;
        }

        public String emit(String value) {
            return value;
        }
    }

    /** The same with ten overloaded methods more: what one more of them costs. */
    public static class WideContext extends Context {
        public int emit1(int value) {
            return value;
        }

        public String emit1(String value) {
            return value;
        }

        public int emit2(int value) {
            return value;
        }

        public String emit2(String value) {
            return value;
        }

        public int emit3(int value) {
            return value;
        }

        public String emit3(String value) {
            return value;
        }

        public int emit4(int value) {
            return value;
        }

        public String emit4(String value) {
            return value;
        }

        public int emit5(int value) {
            return value;
        }

        public String emit5(String value) {
            return value;
        }

        public int emit6(int value) {
            return value;
        }

        public String emit6(String value) {
            return value;
        }

        public int emit7(int value) {
            return value;
        }

        public String emit7(String value) {
            return value;
        }

        public int emit8(int value) {
            return value;
        }

        public String emit8(String value) {
            return value;
        }

        public int emit9(int value) {
            return value;
        }

        public String emit9(String value) {
            return value;
        }

        public int emit10(int value) {
            return value;
        }

        public String emit10(String value) {
            return value;
        }
    }

    private static final String COUNT =
            "import gc, sys\n"
                    + "gc.collect()\n" // what only cycles hold is not kept
                    + "method_lists = sum(1 for o in gc.get_objects() if type(o) is list and o"
                    + " and all(type(m).__name__ == 'PyJMethod' for m in o))\n"
                    + "pemja_modules = sum(1 for o in gc.get_objects()"
                    + " if type(o).__name__ == 'module' and o.__name__ == '_pemja')\n"
                    + "blocks = sys.getallocatedblocks()\n";

    /**
     * Arguments: the Python executable, its import paths (joined by the path separator), how
     * many interpreters, report every, "wide" to set a {@link WideContext} into each instead of
     * a {@link Context} (else "narrow"), and optionally Python to run in each before it closes.
     */
    public static void main(String[] args) {
        PythonInterpreterConfig config =
                PythonInterpreterConfig.newBuilder()
                        .setPythonExec(args[0])
                        .addPythonPaths(args[1].split(java.io.File.pathSeparator))
                        .setExcType(PythonInterpreterConfig.ExecType.MULTI_THREAD)
                        .build();
        int interpreters = Integer.parseInt(args[2]);
        int every = Integer.parseInt(args[3]);
        boolean wide = args.length > 4 && args[4].equals("wide");
        String beforeClose = args.length > 5 ? args[5] : null;
        for (int closed = 0; closed <= interpreters; closed++) {
            PythonInterpreter interpreter = new PythonInterpreter(config);
            interpreter.set("context", wide ? new WideContext() : new Context());
            interpreter.exec("context.emit(1); context.emit('one')");
            if (closed % every == 0) {
                interpreter.exec(COUNT);
                System.out.println(
                        "{\"closed\": " + closed
                                + ", \"method_lists\": " + interpreter.get("method_lists")
                                + ", \"pemja_modules\": " + interpreter.get("pemja_modules")
                                + ", \"blocks\": " + interpreter.get("blocks") + "}");
            }
            if (beforeClose != null) {
                interpreter.exec(beforeClose);
            }
            interpreter.close(); // finalizes the interpreter's thread state and caches
        }
    }
}
