/** A count a bench script takes from the environment (`SOAK_STREAMS=200`): a positive integer, else `fallback`. */
export const envCount = (name: string, fallback: number): number => {
  const value = Number(process.env[name])
  return Number.isInteger(value) && value > 0 ? value : fallback
}
